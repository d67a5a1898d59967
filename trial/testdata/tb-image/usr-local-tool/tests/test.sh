#!/bin/bash
apt-get update
apt-get install -y python3 python3-pytest
cd /tests && python3 -m pytest -rA --junitxml=/logs/verifier/junit.xml test_outputs.py
