"""Checks the users and owners the solution left, as Docker keeps them."""

import os
import pwd
import grp
import subprocess


def owner(p):
    st = os.lstat(p)
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name


def test_alice_has_a_home_beside_bob():
    alice = pwd.getpwnam("alice")
    assert alice.pw_uid not in (0, 1500) and alice.pw_dir == "/home/alice"
    assert owner("/home/alice") == ("alice", "alice")
    assert pwd.getpwnam("bob").pw_uid == 1500
    assert owner("/home/bob") == ("bob", "bob")


def test_x_belongs_to_alice():
    assert owner("/app/x") == ("alice", "alice")


def test_y_made_by_alice():
    assert owner("/app/drop") == ("alice", "alice")
    assert owner("/app/drop/y") == ("alice", "alice")


def test_alice_is_not_root():
    uid = str(pwd.getpwnam("alice").pw_uid)
    out = subprocess.run(["su", "alice", "-c", "id -u; touch /root/by-alice"], capture_output=True, text=True)
    assert out.stdout.split()[:1] == [uid], out.stdout + out.stderr
    assert out.returncode != 0 and not os.path.exists("/root/by-alice"), out.stdout + out.stderr
