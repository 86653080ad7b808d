"""Test helpers shared by several test modules (servers, builders); no tests here."""
