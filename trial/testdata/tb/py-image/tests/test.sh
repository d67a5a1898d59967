#!/bin/bash
# The python image's pip and python.
pip install --no-cache-dir pytest==8.4.1
python -m pytest /tests/test_outputs.py -rA --junitxml=/logs/verifier/junit.xml
