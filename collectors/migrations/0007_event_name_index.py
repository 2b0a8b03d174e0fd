from django.db import migrations, models


class Migration(migrations.Migration):
    """The diagnosis reads an incident's events by the names of its objects, of any kind: without an index
    leading with the name, that read scanned every event of the lookback."""

    dependencies = [
        ("collectors", "0006_telemetry_sample_keys"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="kubeevent",
            index=models.Index(fields=["cluster", "involved_name", "last_time"], name="event_name"),
        ),
    ]
