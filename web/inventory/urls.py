"""Entity pages (docs/design.md §6). Names: collectors:<kind>."""

from __future__ import annotations

from django.urls import path

from web import inventory as views

app_name = "collectors"

urlpatterns = [
    path("c/<slug:cluster>/projects/<str:name>/", views.project_detail, name="project"),
    path("c/<slug:cluster>/queues/<str:name>/", views.queue_detail, name="queue"),
    path("c/<slug:cluster>/departments/<str:name>/", views.department_detail, name="department"),
    path("c/<slug:cluster>/jobs/", views.job_list, name="jobs"),
    path("c/<slug:cluster>/jobs/<str:namespace>/<str:name>/", views.job_detail, name="job"),
    path("c/<slug:cluster>/jobs/<str:namespace>/<str:name>/why/", views.job_why, name="job_why"),
    path("c/<slug:cluster>/pods/<str:namespace>/<str:name>/", views.pod_detail, name="pod"),
    path("c/<slug:cluster>/pods/<str:namespace>/<str:name>/logs/", views.pod_logs, name="pod_logs"),
    path("c/<slug:cluster>/nodes/<str:name>/", views.node_detail, name="node"),
    path("c/<slug:cluster>/gpus/<str:name>/", views.gpu_detail, name="gpu"),
]
