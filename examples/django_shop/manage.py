#!/usr/bin/env python
"""The example shop's manage.py: migrate, durable_devserver, durable_worker, place_order."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
