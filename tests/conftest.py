"""Shared test settings: hypothesis profiles sized for this 2-core machine."""

from hypothesis import HealthCheck, settings

# Chain calls take milliseconds each and vary with load: no per-example deadline.
settings.register_profile(
    "mcfl",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("mcfl")
