#!/bin/bash
pip3 install pytest
cd /tests && pytest -rA --junitxml=/logs/verifier/junit.xml test_outputs.py
