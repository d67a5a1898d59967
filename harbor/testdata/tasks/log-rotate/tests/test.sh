#!/bin/bash
# pytest comes with the image's python3; nothing is fetched at verify time.
mkdir -p /logs/verifier
cd /app
python3 -m pytest -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_rotate.py
