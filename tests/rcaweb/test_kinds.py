"""The registry of kinds (rcaweb/kinds.py) against what answers: web/inventory/urls.py, each kind's page, its link
and its charts. Adding a kind in one place only (a URL without an entry, an entry without a page, a chart that
does not build) fails here."""

from __future__ import annotations

import re
from datetime import timedelta

from django.template import Context, Template
from django.urls import URLPattern, get_resolver, resolve

from collectors import inventory
from collectors.inventory import Observed
from collectors.models import KIND_CHOICES, NAMESPACED_KINDS, Entity
from collectors.queries import EVENT_KINDS, Ref
from incidents import snapshot
from rcaweb import kinds
from rcaweb.cursor import Cursor
from tests.collectors.factories import PageTestCase
from web import inventory as views
from web.console import chartdata
from web.incidents.webhooks import CHANGE_KINDS
from web.inventory.joblist import JobFilterForm

# One object of each kind in the small cluster's story (tests/collectors/factories.py); its department is
# recorded by the test.
SAMPLES = {
    "project": ("", "vision"),
    "queue": ("", "vision"),
    "job": ("vision", "resnet-train"),
    "pod": ("vision", "resnet-train-0"),
    "node": ("", "h100-01"),
    "gpu": None,  # the first GPU of h100-01 (its name is a UUID)
    "department": ("", "research"),
}
_PARAM = re.compile(r"<(?:[^>:]+:)?(\w+)>")


def _collectors_patterns() -> dict[str, URLPattern]:
    resolver = get_resolver()
    ns_resolver = resolver.namespace_dict["collectors"][1]
    return {p.name: p for p in ns_resolver.url_patterns if isinstance(p, URLPattern) and p.name}


class RegistryMatchesUrlsTest(PageTestCase):
    def test_every_collectors_page_belongs_to_a_kind_and_every_kind_has_its_page(self) -> None:
        declared = {k.name for k in kinds.KINDS} | {p for k in kinds.KINDS for p in k.pages}
        assert set(_collectors_patterns()) == declared

    def test_each_kinds_page_has_the_path_view_and_arguments_the_registry_declares(self) -> None:
        patterns = _collectors_patterns()
        for k in kinds.KINDS:
            route = str(patterns[k.name].pattern)
            params = ["namespace", "name"] if k.namespaced else ["name"]
            assert route == f"c/<slug:cluster>/{k.segment}/" + "".join(f"<str:{p}>/" for p in params), route
            assert _PARAM.findall(route) == ["cluster", *params]
            assert patterns[k.name].callback is getattr(views, k.view), k.name
            ns, name = ("team", "x") if k.namespaced else ("", "x")
            url = k.url("c1", ns, name)
            assert resolve(url).url_name == k.name and resolve(url).kwargs["name"] == name

    def test_the_models_the_api_and_the_snapshot_take_their_kinds_from_it(self) -> None:
        assert [c for c, _ in KIND_CHOICES] == list(kinds.names())
        assert [c for c, _ in Entity._meta.get_field("kind").choices] == list(kinds.names())
        assert frozenset({"job", "pod"}) == NAMESPACED_KINDS
        assert set(CHANGE_KINDS) == set(kinds.names()) - {"department"}
        assert set(snapshot.KINDS) == {"node", "gpu", "queue", "project"}
        assert EVENT_KINDS == {"Pod": "pod", "Job": "job", "Node": "node"}
        assert set(chartdata.CHARTS_BY_KIND) == {k.name for k in kinds.with_charts()} | {kinds.FLEET}

    def test_every_job_filter_is_a_field_of_the_job_list(self) -> None:
        fields = set(JobFilterForm.base_fields)
        for k in kinds.KINDS:
            if k.job_filter:
                assert k.job_filter in fields, k.name

    def test_every_chart_has_a_builder(self) -> None:
        for k in kinds.with_charts():
            for ch in k.charts:
                assert ch.name in chartdata.TITLES, (k.name, ch.name)


class EveryKindAnswersTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.at = self.times["end"]
        inventory.record_states(
            self.cluster,
            [Observed(kind="department", name="research", state={"quota_gpus": 8, "projects": ["vision"]})],
            self.at - timedelta(minutes=5),
        )

    def _sample(self, kind: str) -> Entity:
        qs = Entity.objects.select_related("cluster").filter(cluster=self.cluster, kind=kind)
        if SAMPLES[kind] is not None:
            ns, name = SAMPLES[kind]
            qs = qs.filter(namespace=ns, name=name)
        entity = qs.order_by("name").first()
        assert entity is not None, f"no {kind} in the story"
        return entity

    def test_the_registry_covers_the_story(self) -> None:
        assert set(SAMPLES) == set(kinds.names())

    def test_every_kind_has_a_page_a_link_and_its_charts(self) -> None:
        cur = Cursor(self.at, timedelta(hours=2))
        for k in kinds.KINDS:
            entity = self._sample(k.name)
            url = entity.get_absolute_url()
            assert url == k.url(self.cluster.name, entity.namespace, entity.name)
            r = self.get(url, self.at)
            assert r.status_code == 200, (k.name, r.status_code)
            assert k.template in [t.name for t in r.templates], k.name
            # its link: the one tag, to its page with the cursor, reading namespace/name or the name
            link = Template("{% load rcaweb %}{% entity_link e %}").render(
                Context({"e": entity, "cursor": cur})
            )
            text = f"{entity.namespace}/{entity.name}" if k.namespaced else entity.name
            assert (
                link
                == f'<a class="ent ent-{k.name}" href="{url}?{cur.query().replace("&", "&amp;")}">{text}</a>'
            ), link
            ref = Ref(self.cluster, k.name, entity.name, entity.namespace)
            assert ref.get_absolute_url() == url
            # its charts, in the declared order, each loaded from the page and answering
            shown = r.context["entity_charts"]
            assert [title for _, title in shown] == [ch.title for ch in k.charts], k.name
            html = r.content.decode()
            for (chart_url, _), ch in zip(shown, k.charts, strict=True):
                assert f"/{k.name}/{k.ident(entity.namespace, entity.name)}/{ch.name}/" in chart_url
                assert chart_url.replace("&", "&amp;") in html, chart_url
                c = self.get(chart_url, headers={"HX-Request": "true"})
                assert c.status_code == 200, (k.name, ch.name, c.status_code)
                assert c.context["chart"].name == ch.name

    def test_a_chart_the_registry_does_not_declare_is_a_404(self) -> None:
        pod = self._sample("pod")
        r = self.get(f"/charts/{self.cluster.name}/pod/{pod.namespace}/{pod.name}/utilization/", self.at)
        assert r.status_code == 404
