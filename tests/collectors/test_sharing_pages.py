"""GPU sharing and MIG on the pages (issue 18 item 5), through the real pipeline on the bundled scenario
shared-mig-department-crashloop.yaml: a shared GPU lists its shares with their pods, fractions and memory
and KAI's reservation pod; a MIG node shows mig-manager's layout and its instances per profile."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from collectors.models import GpuSlice

SCENARIO = (
    Path(__file__).resolve().parents[2] / "simulator/scenarios/shared-mig-department-crashloop.yaml"
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_a_shared_gpu_lists_its_shares_and_a_mig_node_its_layout() -> None:
    call_command("run_scenario", str(SCENARIO), "--json", "--database", "configured", stdout=StringIO())
    client = Client()
    client.force_login(User.objects.create_user("op-share", password="pw-op-12345"))
    share = GpuSlice.objects.filter(kind="share").exclude(pod="").order_by("valid_from").first()
    assert share is not None, "the scenario's shared pool placed no share"
    t = share.valid_from.strftime("%Y-%m-%dT%H:%M:%SZ")
    html = client.get(f"/c/{share.cluster.name}/gpus/{share.gpu.name}/", {"t": t}).content.decode()
    panel = html.split('id="gpu-slices"')[1].split("</section>")[0]
    ns, _, pod = share.pod.partition("/")
    assert f"/pods/{ns}/{pod}/" in panel and "GPU share" in panel
    assert re.search(r"held for KAI by <a [^>]*runai-reservation", panel), panel[:600]
    assert f"{share.fraction}" in panel
    mig = GpuSlice.objects.filter(kind="mig").order_by("valid_from").first()
    assert mig is not None
    t = mig.valid_from.strftime("%Y-%m-%dT%H:%M:%SZ")
    node = client.get(f"/c/{mig.cluster.name}/nodes/{mig.node}/", {"t": t}).content.decode()
    assert "mig-manager" in node and f"nvidia.com/mig-{mig.profile}: capacity" in node
    gpu = client.get(f"/c/{mig.cluster.name}/gpus/{mig.gpu.name}/", {"t": t}).content.decode()
    assert "MIG instances (" in gpu and mig.profile in gpu.split('id="gpu-slices"')[1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_project_usage_counts_shares_as_fractions() -> None:
    from collectors import queries
    from collectors.models import EntityVersion

    call_command("run_scenario", str(SCENARIO), "--json", "--database", "configured", stdout=StringIO())
    client = Client()
    client.force_login(User.objects.create_user("op-share2", password="pw-op-12345"))
    for share in GpuSlice.objects.filter(kind="share").exclude(pod="").order_by("valid_from"):
        ns, _, pod = share.pod.partition("/")
        v = EntityVersion.objects.as_of(share.valid_from).filter(kind="pod", entity__name=pod).first()
        if v is None or not v.project:
            continue
        units = queries.running_gpu_units(share.cluster, share.valid_from, project=v.project)
        if float(units).is_integer():
            continue
        t = share.valid_from.strftime("%Y-%m-%dT%H:%M:%SZ")
        html = client.get(f"/c/{share.cluster.name}/projects/{v.project}/", {"t": t}).content.decode()
        assert f"<strong>{round(units, 2)}</strong> of quota" in html, (units, v.project)
        return
    pytest.fail("no moment with a fractional project usage in the scenario")
