"""``cluster add`` / ``cluster check`` take an admin's input and must neither crash nor hang on it (issue 42,
finding 7): a bad URL is a one-line error naming its option, a URL's credentials are refused and never shown,
and a kubeconfig is bounded in size and YAML aliases before the kubernetes client reads it
(collectors/sources/endpoints.py, collectors/sources/kubeconfig.py)."""

from __future__ import annotations

import os
import time
from io import StringIO
from pathlib import Path

import pytest
import requests
from django.core.management import CommandError, call_command
from django.test import override_settings

from collectors.clustercheck import check_cluster
from collectors.models import Cluster
from collectors.sources.endpoints import check_url, shown_url
from collectors.sources.kubeconfig import MAX_KUBECONFIG_BYTES, KubeconfigError, check_kubeconfig
from collectors.sources.prometheus import PrometheusSource
from tests.collectors.faultserver import kubeconfig_for, refused_url

pytestmark = pytest.mark.django_db

# 9 aliases of 9 aliases ... nine levels deep: ~700 bytes that safe_load expands to 9**9 list items
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
    for i in range(8)
)


def add(*args: str) -> str:
    out = StringIO()
    call_command("cluster", "add", *args, stdout=out)
    return out.getvalue()


#
# URLs
#


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1", "not a valid URL"),
        ("http://prom:99999", "Port out of range"),
        ("http://prom:0", "port 0"),
        ("http://prom%00:9090", "NUL byte"),
        ("http://prom\x00:9090", "NUL byte"),
        ("http://prom :9090", "space"),
        ("http://prom:90a0", "Port could not be cast"),
        ("http://pr$m:9090", "not a host name"),
        ("http://prom:9090/?x=1", "no ?query"),
        ("prometheus:9090", "not an http(s) URL"),
        ("http://p/" + "x" * 300, "longer than 200"),
    ],
)
def test_add_refuses_a_bad_prometheus_url_in_one_line_naming_the_option(url: str, why: str) -> None:
    with pytest.raises(CommandError) as exc:
        add("x", "--in-cluster", "--prometheus", url)
    message = str(exc.value)
    assert message.startswith("--prometheus ") and why in message and "\n" not in message
    assert not Cluster.objects.exists()


def test_add_refuses_a_bad_runai_url_naming_it() -> None:
    with pytest.raises(CommandError, match=r"^--runai 'http://\[::1': not a valid URL"):
        add("x", "--in-cluster", "--prometheus", "http://p:9090", "--runai", "http://[::1")


def test_add_refuses_credentials_in_a_url_naming_where_they_go_and_never_shows_them() -> None:
    with pytest.raises(CommandError) as exc:
        add("x", "--in-cluster", "--prometheus", "http://admin:S3cret@prom:9090")
    message = str(exc.value)
    assert "S3cret" not in message and "admin" not in message
    assert "RCAWEB_PROMETHEUS_USERNAME" in message and "RCAWEB_PROMETHEUS_PASSWORD" in message
    with pytest.raises(CommandError) as exc:
        add("x", "--in-cluster", "--prometheus", "http://p:9090", "--runai", "https://tok@runai.example")
    assert "tok@" not in str(exc.value) and "RCAWEB_RUNAI_TOKEN" in str(exc.value)
    assert not Cluster.objects.exists()


def test_add_accepts_the_urls_people_use() -> None:
    for i, url in enumerate(
        [
            "http://prometheus:9090",
            "http://prometheus.monitoring.svc.cluster.local:9090/prom",
            "https://10.0.0.7:9090",
            "http://[::1]:9090",
            "http://kube_prometheus:9090",
        ]
    ):
        assert check_url("--prometheus", url) == url
        assert "added cluster" in add(f"c{i}", "--in-cluster", "--prometheus", url)


def test_shown_url_hides_credentials() -> None:
    assert shown_url("http://u:p@prom:9090/x") == "http://***@prom:9090/x"
    assert shown_url("http://prom:9090/a@b") == "http://prom:9090/a@b"


def test_list_and_check_never_show_credentials_of_a_cluster_stored_before(tmp_path: Path) -> None:
    Cluster.objects.create(name="old", prometheus_url=f"http://u:S3cret@{refused_url()[7:]}")
    out = StringIO()
    call_command("cluster", "list", stdout=out)
    assert "S3cret" not in out.getvalue() and "***@127.0.0.1" in out.getvalue()
    checks = check_cluster(Cluster.objects.get(name="old"), timeout=1)
    prom = next(c for c in checks if c.source == "prometheus")
    assert not prom.ok and "credentials in the URL are not accepted" in prom.detail
    assert "S3cret" not in prom.detail


def test_check_reports_a_stored_url_no_request_can_use_instead_of_crashing() -> None:
    cluster = Cluster.objects.create(name="old", prometheus_url="http://[::1", runai_url="http://r:99999")
    checks = {c.source: c for c in check_cluster(cluster, timeout=1)}
    assert (
        not checks["prometheus"].ok
        and "--prometheus 'http://[::1': not a valid URL" in checks["prometheus"].detail
    )
    assert not checks["runai"].ok and "Port out of range" in checks["runai"].detail


def test_prometheus_credentials_come_from_the_settings() -> None:
    with override_settings(RCAWEB_PROMETHEUS_USERNAME="rca", RCAWEB_PROMETHEUS_PASSWORD="pw"):
        assert PrometheusSource("http://p:9090").session.auth == ("rca", "pw")
    assert PrometheusSource("http://p:9090").session.auth is None
    own = requests.Session()
    own.auth = ("mine", "x")
    with override_settings(RCAWEB_PROMETHEUS_USERNAME="rca"):
        assert PrometheusSource("http://p:9090", session=own).session.auth == ("mine", "x")


#
# Kubeconfig
#


def test_add_refuses_a_yaml_alias_bomb_at_once(tmp_path: Path) -> None:
    bomb = tmp_path / "kc"
    bomb.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 800
    started = time.monotonic()
    with pytest.raises(CommandError, match=r"^--kubeconfig .*: YAML aliases \(\*a\) are not accepted"):
        add("x", "--kubeconfig", str(bomb), "--prometheus", "http://p:9090")
    assert time.monotonic() - started < 2
    assert not Cluster.objects.exists()


def test_add_refuses_aliases_even_in_a_kubeconfig_the_client_would_load(tmp_path: Path) -> None:
    path = kubeconfig_for(refused_url(), str(tmp_path / "kc"))
    with open(path, "a") as fh:
        fh.write("x-defaults: &d {a: 1}\nx-copy: *d\n")
    with pytest.raises(CommandError, match="YAML aliases"):
        add("x", "--kubeconfig", path, "--prometheus", "http://p:9090")


def test_add_refuses_a_kubeconfig_over_one_mib_without_reading_it(tmp_path: Path) -> None:
    path = kubeconfig_for(refused_url(), str(tmp_path / "kc"))
    with open(path, "a") as fh:
        fh.write("#" + "x" * MAX_KUBECONFIG_BYTES + "\n")  # valid YAML: a comment
    with pytest.raises(CommandError, match=r"^--kubeconfig .*: \d+ bytes: a kubeconfig is at most 1048576"):
        add("x", "--kubeconfig", path, "--prometheus", "http://p:9090")
    huge = tmp_path / "huge"
    with open(huge, "wb") as fh:  # sparse: 300 MB without writing them
        fh.truncate(300 * 1024 * 1024)
    with pytest.raises(KubeconfigError, match="314572800 bytes"):
        check_kubeconfig(str(huge))


def test_check_kubeconfig_refuses_what_is_not_a_file_or_not_a_mapping(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(KubeconfigError, match="not a regular file"):
        check_kubeconfig(str(fifo))  # never opened: opening would wait for a writer
    (tmp_path / "list").write_text("- a\n- b\n")
    with pytest.raises(KubeconfigError, match="expected a YAML mapping"):
        check_kubeconfig(str(tmp_path / "list"))
    (tmp_path / "deep").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(KubeconfigError, match="nested too deeply|not YAML"):
        check_kubeconfig(str(tmp_path / "deep"))


def test_check_and_the_sweeps_refuse_a_kubeconfig_swapped_for_a_bomb_after_add(tmp_path: Path) -> None:
    path = kubeconfig_for(refused_url(), str(tmp_path / "kc"))
    add("x", "--kubeconfig", path, "--prometheus", refused_url())
    Path(path).write_text(ALIAS_BOMB)
    started = time.monotonic()
    checks = check_cluster(Cluster.objects.get(name="x"), timeout=1)
    assert time.monotonic() - started < 10
    kube = next(c for c in checks if c.source == "kubernetes")
    assert not kube.ok and "YAML aliases" in kube.detail
