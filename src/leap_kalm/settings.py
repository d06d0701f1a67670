"""Project settings: hooks and the config loader."""

from leap_kalm.config_resolvers import RESOLVERS, ProjectConfigLoader
from leap_kalm.hooks import CredentialsHook, ResourceHook, SeedingHook, TrackingHook

HOOKS = (SeedingHook(), CredentialsHook(), TrackingHook(), ResourceHook())

CONFIG_LOADER_CLASS = ProjectConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "merge_strategy": {"parameters": "soft"},
    "custom_resolvers": RESOLVERS,
}
