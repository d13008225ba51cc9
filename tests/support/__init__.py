"""Helpers shared by tests (servers and apps that tests start on 127.0.0.1)."""
