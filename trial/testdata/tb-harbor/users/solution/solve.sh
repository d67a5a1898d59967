#!/bin/bash
set -e
useradd -m alice
touch /app/x
chown alice:alice /app/x
mkdir /app/drop
chown alice:alice /app/drop
su alice -c 'touch /app/drop/y'
