"""KubeSource against the simulator's API server over HTTP, and against injected faults."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors.models import Cluster
from collectors.sources.errors import SourceError
from collectors.sources.kai import KaiSource
from collectors.sources.kubernetes import KubeSource
from tests.collectors.faultserver import fault_server, kubeconfig_for, refused_url
from tests.collectors.simhelpers import served, small_world


@pytest.fixture(scope="module")
def sim():
    world = small_world("kai")
    with served(world) as server:
        server.advance_to(world.start + timedelta(minutes=40))
        yield server


def _source(path: str, **kw) -> KubeSource:
    return KubeSource(Cluster(name="t", kubeconfig=path), **kw)


def test_it_lists_every_kind_as_plain_json(sim):
    kube = _source(sim.kubeconfig_path)
    nodes, pods, jobs = kube.list_nodes(), kube.list_pods(), kube.list_jobs()
    assert [n["metadata"]["name"] for n in nodes] == ["h100-01", "h100-02", "h100-03"]
    assert {p["metadata"]["labels"]["job-name"] for p in pods} >= {"resnet-train", "crashy"}
    assert {j["metadata"]["name"] for j in jobs} == {"resnet-train", "big", "crashy", "small"}
    assert isinstance(pods[0]["spec"]["containers"][0]["resources"], dict)
    queues = KaiSource(kube).list_queues()
    assert {q["metadata"]["name"] for q in queues} >= {"vision", "nlp"}
    assert kube.list_events()


def test_it_paginates_with_limit_and_continue(sim):
    kube = _source(sim.kubeconfig_path, page_size=1)
    with fault_server(upstream=sim.kube_url, upstream_ca=sim.kube_ca_path) as proxy:
        kube = _source(kubeconfig_for(proxy.url, sim.kubeconfig_path + ".proxy"), page_size=1)
        pods = kube.list_pods()
    assert len(pods) == len(_source(sim.kubeconfig_path).list_pods()) >= 3
    assert sum("continue=" in p for p in proxy.paths) == len(pods) - 1
    assert all("limit=1" in p for p in proxy.paths)


def test_it_reads_a_redacted_log_tail_current_and_previous(sim):
    kube = _source(sim.kubeconfig_path)
    crashy = next(p for p in kube.list_pods() if p["metadata"]["name"].startswith("crashy"))
    ns, name = crashy["metadata"]["namespace"], crashy["metadata"]["name"]
    previous = kube.pod_log(ns, name, previous=True, tail_lines=20)
    assert "KeyError" in previous
    assert "abcdefghijklmnop1234" not in previous and "[redacted]" in previous
    assert len(previous.splitlines()) <= 20
    with pytest.raises(SourceError, match="container"):
        kube.pod_log(ns, name, container="nope")


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("500", "server error 500"),
        ("401", "unauthorized"),
        ("403", "forbidden"),
        ("garbage", "not JSON"),
        ("hang", "did not answer"),
    ],
)
def test_it_turns_every_fault_into_a_source_error(sim, tmp_path, fault, words):
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"/api/v1/nodes": fault}, hang_s=2
    ) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")), timeout=0.5)
        with pytest.raises(SourceError) as err:
            kube.list_nodes()
        assert kube.list_jobs()  # other calls through the same server still work
    assert err.value.source == "k8s" and err.value.call == "list nodes" and words in err.value.message


def test_it_reports_refused_and_bad_credentials(tmp_path):
    kube = _source(kubeconfig_for(refused_url(), str(tmp_path / "kc")), timeout=1)
    with pytest.raises(SourceError, match="cannot connect to http://127.0.0.1:"):
        kube.list_pods()  # refused is not "did not answer" (urllib3's NewConnectionError is a timeout subclass)
    with pytest.raises(SourceError, match="cannot load Kubernetes credentials"):
        _source(str(tmp_path / "missing-kubeconfig"))


def test_it_watches_events_and_asks_for_a_relist_on_410(sim, tmp_path):
    kube = _source(sim.kubeconfig_path)
    kube.list_events()
    rv = kube.last_resource_version["list events"]
    assert rv
    sim.advance_to(sim.world.now + timedelta(minutes=2))
    events = list(kube.watch_events(rv, timeout_s=1))
    assert all(e["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") for e in events)
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"watch=": "expired-watch"}
    ) as proxy:
        stale = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")))
        with pytest.raises(SourceError) as err:
            list(stale.watch_events("1", timeout_s=1))
    assert err.value.gone and "too old resource version" in err.value.message


def test_it_lists_again_when_a_continue_token_expires(sim, tmp_path):
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"continue=": "410"}
    ) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")), page_size=2)
        with pytest.raises(SourceError) as err:
            kube.list_pods()
    assert err.value.gone
    # one restart from the first page, then the second expiry is reported
    assert sum("continue=" not in p for p in proxy.paths) == 2


def test_reusing_lists_yields_what_reuse_knew_and_decodes_only_the_rest(sim):
    """``iter_reusing`` shows each item undecoded to ``reuse``: what it returns takes the item's place (in the
    listing's order, across pages), the others come decoded exactly as ``iter_items`` gives them."""
    plain = _source(sim.kubeconfig_path).list_pods()
    known = {p["metadata"]["name"] for p in plain[::2]}
    seen: list[tuple[str, str]] = []

    def reuse(item):
        m = item.get("metadata")
        seen.append((m.get("name"), m.get("resourceVersion")))
        return ("kept", m.get("name")) if m.get("name") in known else None

    kube = _source(sim.kubeconfig_path, page_size=2)
    pods = list(kube.iter_pods(reuse))
    assert [p if isinstance(p, tuple) else ("decoded", p["metadata"]["name"]) for p in pods] == [
        ("kept" if p["metadata"]["name"] in known else "decoded", p["metadata"]["name"]) for p in plain
    ]
    assert [p for p in pods if isinstance(p, dict)] == [
        p for p in plain if p["metadata"]["name"] not in known
    ]
    assert seen == [(p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in plain]
    assert kube.last_resource_version["list pods"]  # where a watch would start, as with iter_items


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"metadata": {}, "items": {}}', "no items list"),
        (b'{"metadata": {}, "items": [1]}', "an item is not an object"),
    ],
)
def test_reusing_lists_name_a_malformed_answer(sim, tmp_path, body, words):
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, bodies={"/api/v1/pods": body}
    ) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")))
        with pytest.raises(SourceError, match=words):
            list(kube.iter_pods(lambda item: None))


def test_a_listing_read_ahead_gives_what_a_live_one_does_without_asking_again(sim, tmp_path):
    live = _source(sim.kubeconfig_path)
    want = {
        call: live.lister(call) for call in ("list nodes", "list pods", "list queues.scheduling.run.ai/v2")
    }
    with fault_server(upstream=sim.kube_url, upstream_ca=sim.kube_ca_path) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")), page_size=2)
        kube.prefetch(list(want))
        assert kube._reader is not None
        kube._reader.join(timeout=10)
        asked = list(proxy.paths)
        nodes, pods, queues = kube.list_nodes(), kube.list_pods(), KaiSource(kube).list_queues()
        assert proxy.paths == asked  # nothing asked again
        jobs = kube.list_jobs()  # a listing not read ahead is asked as before
        assert len(proxy.paths) > len(asked)
    assert nodes == live.list_nodes() and pods == live.list_pods() and jobs == live.list_jobs()
    assert queues == KaiSource(live).list_queues()
    assert len(asked) == sum(-(-len(items) // 2) for items in (nodes, pods, queues))  # each page once
    assert kube.last_resource_version["list pods"]


def test_a_read_ahead_stops_at_its_bound_and_its_listing_goes_on_live(sim, tmp_path):
    live_pods = _source(sim.kubeconfig_path).list_pods()
    with fault_server(upstream=sim.kube_url, upstream_ca=sim.kube_ca_path) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")), page_size=1)
        kube.prefetch(["list pods", "list nodes"], max_bytes=1)  # one page of pods, no node
        kube._reader.join(timeout=10)
        assert len(proxy.paths) == 1
        pods, nodes = kube.list_pods(), kube.list_nodes()
    assert pods == live_pods and [n["metadata"]["name"] for n in nodes] == ["h100-01", "h100-02", "h100-03"]
    pod_paths = [p for p in proxy.paths if "/pods" in p]
    assert len(pod_paths) == len(pods) and sum("continue=" not in p for p in pod_paths) == 1  # went on
    assert len([p for p in proxy.paths if "/nodes" in p]) == 3  # listed from the start


def test_a_read_ahead_failure_is_raised_by_its_listing_and_spares_the_others(sim, tmp_path):
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"/api/v1/nodes": "403"}
    ) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")))
        kube.prefetch(["list nodes", "list jobs"])
        with pytest.raises(SourceError) as err:
            kube.list_nodes()
        assert {j["metadata"]["name"] for j in kube.list_jobs()} == {"resnet-train", "big", "crashy", "small"}
        with pytest.raises(ValueError, match="no watchable listing"):
            kube.prefetch(["list everything"])
        kube.close()
    assert err.value.call == "list nodes" and "forbidden" in err.value.message


def test_closing_a_source_stops_its_read_ahead(sim, tmp_path):
    with fault_server(
        upstream=sim.kube_url, upstream_ca=sim.kube_ca_path, faults={"/api/v1/nodes": "hang"}, hang_s=1
    ) as proxy:
        kube = _source(kubeconfig_for(proxy.url, str(tmp_path / "kc")), timeout=0.5)
        kube.prefetch(["list nodes", "list pods", "list jobs"])
        kube.close()  # waits for the request in flight (it times out), reads nothing after it
        assert not kube._reader.is_alive()
    assert not any("/pods" in p or "/jobs" in p for p in proxy.paths)
