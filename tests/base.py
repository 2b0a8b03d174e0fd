"""Personas and helpers shared by view tests (docs/conventions.md §20)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth.models import Group, User
from django.test import Client, TestCase

from collectors.models import Cluster

T0 = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


class BaseTestCase(TestCase):
    """alice: on-call responder; bob: read-only viewer; carol: admin; plus an anonymous client."""

    def setUp(self) -> None:
        super().setUp()
        responders, _ = Group.objects.get_or_create(name="responder")
        viewers, _ = Group.objects.get_or_create(name="viewer")
        self.alice = User.objects.create_user("alice", "alice@example.org", "password")
        self.alice.groups.add(responders)
        self.bob = User.objects.create_user("bob", "bob@example.org", "password")
        self.bob.groups.add(viewers)
        self.carol = User.objects.create_superuser("carol", "carol@example.org", "password")
        self.anon = Client()
        self.client.force_login(self.alice)
        self.cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")

    def login_as(self, user: User) -> Client:
        c = Client()
        c.force_login(user)
        return c
