from __future__ import annotations

import html as htmlmod
import re
from datetime import timedelta

from collectors.models import Change
from tests.collectors.factories import T0, PageTestCase, iso
from web.console import changes as changes_q

W = "4h"


class ChangesTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.t = self.times["end"]
        Change.objects.create(
            cluster=self.cluster,
            time=T0 + timedelta(minutes=100),
            field="deploy",
            source="external",
            actor="ci",
            summary="rolled out scheduler config v42",
            link="https://ci.example.org/run/42",
        )

    def page(self, query: str = "", client=None):
        sep = "&" if query else ""
        return (client or self.client).get(f"/changes/?{query}{sep}t={iso(self.t)}&w={W}")

    def rows(self, html: str) -> list[str]:
        body = re.search(r'<section class="panel" id="change-list">(.*?)</section>', html, re.S).group(1)
        return re.findall(r"<tr><td><time.*?</tr>", body, re.S)

    def test_it_lists_every_change_of_the_window_newest_first(self) -> None:
        html = self.page("show=all").content.decode()
        start = self.t - timedelta(hours=4)
        want = Change.objects.filter(time__gte=start, time__lte=self.t).count()
        rows = self.rows(html)
        assert len(rows) == min(want, 100) and f"{want} changes" in html
        times = re.findall(r'<time datetime="([^"]+)"', "".join(rows))
        assert times == sorted(times, reverse=True)
        assert "rolled out scheduler config v42" in html and 'href="https://ci.example.org/run/42"' in html

    def test_the_signal_comes_first_and_the_churn_is_summed(self) -> None:
        html = self.page().content.decode()
        start = self.t - timedelta(hours=4)
        window = Change.objects.filter(time__gte=start, time__lte=self.t)
        signal = window.filter(changes_q.signal())
        rows = self.rows(html)
        assert len(rows) == min(signal.count(), 100) and f"{signal.count()} change" in html
        assert "rolled out scheduler config v42" in html and any("quota_gpus" in r for r in rows)
        assert not any('<span class="kind">pod</span>' in r for r in rows)
        churn = html.split('id="churn"')[1]
        counts = [int(n) for n in re.findall(r'<td class="num">(\d+)</td><td class="num">\d+</td>', churn)]
        assert sum(counts) == window.count() - signal.count() > 0
        # a churn group opens its changes one by one
        link = re.search(r'<a href="([^"]*show=all[^"]*kind=pod[^"]*)"><code>([^<]+)</code>', churn)
        assert link, churn[:2000]
        listed = self.client.get(htmlmod.unescape(link.group(1))).content.decode()
        pod_rows = self.rows(listed)
        assert pod_rows and all('<span class="kind">pod</span>' in r for r in pod_rows)

    def test_it_tells_the_cluster_s_own_changes_from_people_and_pipelines(self) -> None:
        node = self.story.entity("node", "h100-01")
        at = T0 + timedelta(minutes=110)
        for field, actor, old, new in (
            ("conditions.Ready.status", "kubelet", "False", "True"),
            ("conditions.Ready.reason", "node-ops", "KubeletNotReady", "KubeletReady"),  # a node's own status
            ("ready", "", False, True),
            ("ready_reason", "node-ops", "NodeStatusUnknown", "KubeletReady"),
            ("allocatable.nvidia.com/gpu", "kubelet", 7, 8),
            ("labels.nvidia.com/gpu.count", "gpu-feature-discovery-operator", 7, 8),
            ("unschedulable", "system:serviceaccount:kube-system:cluster-autoscaler", False, True),
            ("taints", "ops-bot", [], [{"key": "maintenance"}]),
            ("unschedulable", "alice", True, False),
        ):
            Change.objects.create(
                cluster=self.cluster,
                entity=node,
                kind="node",
                time=at,
                field=field,
                old=old,
                new=new,
                actor=actor,
            )
        signal = Change.objects.filter(entity=node, time=at).filter(changes_q.signal())
        assert sorted(signal.values_list("field", "actor")) == [
            ("taints", "ops-bot"),
            ("unschedulable", "alice"),
        ]
        rows = [r for r in self.rows(self.page().content.decode()) if "h100-01" in r]
        assert rows and not any("conditions" in r or "kubelet" in r for r in rows), rows
        assert "made by people and pipelines" in self.page().content.decode()

    def test_each_object_links_to_itself_at_the_time_of_its_change(self) -> None:
        html = self.page("project=vision&kind=project").content.decode()
        rows = self.rows(html)
        assert rows
        cut = [r for r in rows if "quota_gpus" in r]
        assert cut, rows
        assert (
            f"/c/gpu-prod/projects/vision/?t={iso(self.times['quota_cut']).replace(':', '%3A')}&amp;w={W}"
            in cut[0]
        )
        assert "alice@example.org" in cut[0]

    def test_it_filters_by_cluster_project_node_kind_actor_and_source(self) -> None:
        def names(q: str) -> set[str]:
            return set(
                re.findall(
                    r'class="ent ent-\w+" href="/c/gpu-prod/\w+/(?:[\w-]+/)?([\w.-]+)/',
                    self.page(q).content.decode(),
                )
            )

        assert names("kind=node") <= {"h100-01", "h100-02", "h100-03", "h100-04"} and "h100-04" in names(
            "kind=node"
        )
        on_node = names("node=h100-04")
        assert "h100-04" in on_node and "vit-large" not in on_node
        assert names("project=nlp") and not names("project=nlp") & {"vision", "resnet-train", "vit-large"}
        assert names("actor=alice") == {"vision"}
        assert "rolled out" in self.page("source=external").content.decode()
        assert "rolled out" not in self.page("source=k8s").content.decode()
        assert "No change in the window" in self.page("cluster=gpu-prod&actor=nobody").content.decode()

    def test_an_invalid_filter_is_a_400_naming_the_field(self) -> None:
        for q, field in (
            ("kind=planet", "kind"),
            ("cluster=nope", "cluster"),
            ("page=0", "page"),
            ("source=ftp", "source"),
        ):
            r = self.page(q)
            assert r.status_code == 400 and field.encode() in r.content, q

    def test_it_is_bounded_and_paginated(self) -> None:
        Change.objects.bulk_create(
            [
                Change(
                    cluster=self.cluster,
                    time=self.t - timedelta(seconds=i),
                    field="x",
                    source="external",
                    summary=f"s{i}",
                )
                for i in range(250)
            ]
        )
        html = self.page().content.decode()
        assert len(self.rows(html)) == 100 and "page 1 of" in html
        older = re.search(r'<a class="btn" href="([^"]+)">older', html).group(1).replace("&amp;", "&")
        assert "page=2" in older and "t=" in older and "w=4h" in older
        assert len(self.rows(self.client.get(older).content.decode())) == 100

    def test_personas_and_fragments(self) -> None:
        assert self.anon.get("/changes/").status_code == 302
        assert (
            'method="post"'
            not in self.page(client=self.login_as(self.bob)).content.decode().split('<main class="page">')[1]
        )
        r = self.client.get(
            f"/changes/?kind=node&t={iso(self.t)}&w={W}",
            headers={"HX-Request": "true", "HX-Target": "change-list"},
        )
        assert r.content.decode().lstrip().startswith('<section class="panel" id="change-list">')


class ChangeDiffTest(PageTestCase):
    def test_a_container_list_change_shows_the_field_that_differs(self) -> None:
        t = self.times["end"]
        pod = self.cluster.entities.filter(kind="pod").first()
        assert pod is not None
        runtime = {"gpus": 8, "env": {}, "ready": True, "restart_count": 0}
        image = "nvcr.io/nvidia/pytorch:24.08-py3-research-"
        Change.objects.create(
            cluster=self.cluster,
            entity=pod,
            kind="pod",
            time=t - timedelta(minutes=5),
            field="containers",
            old=[{"name": "main", "image": image + "1.4", **runtime}],
            new=[{"name": "main", "image": image + "1.5", **runtime}],
            source="k8s",
        )
        html = self.client.get(f"/changes/?kind=pod&t={iso(t)}&w=1h").content.decode()
        row = next(r for r in re.findall(r"<tr><td><time.*?</tr>", html, re.S) if "containers" in r)
        assert "<code>[main].image</code>" in row, row
        assert f'<span class="old">{image}1.4</span> → <span class="new">{image}1.5</span>' in row, row
