"""dragoman: on-device translation."""
