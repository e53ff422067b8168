"""Frontends that turn models into graph modules: :mod:`tilecraft.frontend.nn`."""

from . import nn as nn
