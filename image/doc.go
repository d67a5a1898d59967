// Package image turns a task's environment/Dockerfile into a root
// filesystem the sandbox runs on offline (infra/sandbox Spec.Image),
// instead of the host's system directories.
//
// FROM ubuntu:*, debian:* and python:* map onto one Debian base made by
// debootstrap (variant minbase) from the mirror the host's apt is
// configured for (HostBase); python images get python3, pip and venv
// from Debian, python → python3, and no EXTERNALLY-MANAGED marker. The
// mapping is reported (Result.Mapping); any other base fails. RUN steps
// run at build time with the host's network, as docker build runs them
// (sandbox.BuildRoot.Run: root owning the image's files, new pid, ipc,
// uts and mount namespaces, the image as /, the sandbox's seccomp
// filter), so apt-get install really installs from the mirror. COPY and
// ADD of the build context, ENV, ARG, WORKDIR and USER root are applied
// as the sandbox applies them (the Dockerfile parser is the sandbox's).
// COPY --from, a second FROM, ADD of a URL and unknown base images fail
// at build with one line naming the instruction and the reason; so does
// a RUN that fails (its exit code and last output line).
//
// Every step that changes files is a layer: a directory in overlayfs
// upper form (whiteouts as 0:0 character devices, opaque directories
// marked with trusted.overlay.opaque), made by mounting an overlay of
// the layers below under an empty upper directory and applying the step.
// Its key is a hash of the parent layer's key, the instruction, and its
// inputs: the ARG and ENV values and work directory in force for RUN,
// the build context's contents for COPY and ADD. Tasks whose Dockerfiles
// share a prefix share its layers. Layers live under the cache directory
// (<cache>/layers/<key>, complete once renamed into place); Push and
// Pull move them through the object store as tar (OCI whiteouts).
//
// An offline verifier (sandbox.Spec.Verifier) runs on the task's image
// with one more layer (Verifier): python3, python3-pytest and every
// package test.sh's apt-get or apt install names, installed from the
// mirror, for the stand-ins of harbor/verifier to find; the solution's
// and agent's sandboxes never have it. What a solution installs outside
// the writable directories reaches the verifier's sandbox through the
// attempt's snapshot, as additions that replace or shadow none of this
// layer's files (sandbox,
// "Snapshot layer format").
//
// Each layer's opaque marks are also written as user.overlay.opaque and
// its root marked sandbox.MarkedXattr, so that a sandbox run by a user
// other than root, which copies the layers instead of mounting them, can
// read them.
//
// A layer's scratch directory (<cache>/tmp/<random>) and its build
// overlay are recorded in the host registry (infra/hostres) before they
// are made, so that a build killed half-way leaves them for the next t1
// start to remove.
//
// Building needs root (overlayfs mounts, RUN steps that own the image's
// files), bubblewrap and debootstrap.
package image
