"""Personas and helpers shared by view tests (docs/conventions.md §20)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth.models import Group, User
from django.test import Client, TestCase

from collectors.models import Cluster

T0 = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


class BaseTestCase(TestCase):
    """alice: on-call responder; bob: read-only viewer; carol: admin; plus an anonymous client.

    The personas and the cluster are created once per class (``setUpTestData``); each test still sees them
    as they were, because every test runs in a transaction that is rolled back and Django hands each test
    its own copy of the instances.
    """

    alice: User
    bob: User
    carol: User
    cluster: Cluster

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        responders, _ = Group.objects.get_or_create(name="responder")
        viewers, _ = Group.objects.get_or_create(name="viewer")
        cls.alice = User.objects.create_user("alice", "alice@example.org", "password")
        cls.alice.groups.add(responders)
        cls.bob = User.objects.create_user("bob", "bob@example.org", "password")
        cls.bob.groups.add(viewers)
        cls.carol = User.objects.create_superuser("carol", "carol@example.org", "password")
        cls.cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")

    def setUp(self) -> None:
        super().setUp()
        self.anon = Client()
        self.client.force_login(self.alice)

    def login_as(self, user: User) -> Client:
        c = Client()
        c.force_login(user)
        return c
