#!/bin/bash
pip install pytest==8.4.1
cd /tests && pytest --junitxml=/logs/verifier/junit.xml test_config.py -rA
