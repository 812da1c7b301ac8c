"""Made by ``proto/generate.py`` from ``proto/``: do not edit; run ``make proto``."""
