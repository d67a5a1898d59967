// Package image turns a task's environment/Dockerfile into a root
// filesystem the sandbox runs on offline (infra/sandbox Spec.Image),
// instead of the host's system directories.
//
// FROM ubuntu:*, debian:* and python:* map onto one Debian base made by
// debootstrap (variant minbase) from the mirror the host's apt is
// configured for (HostBase); python images get python3, pip and venv
// from Debian, python → python3, and no EXTERNALLY-MANAGED marker. The
// mapping is reported (Result.Mapping); any other base fails. RUN steps
// run at build time as docker build runs them (sandbox.BuildRoot.Run:
// root owning the image's files, new pid, ipc, uts, mount and network
// namespaces, the image as /, the sandbox's seccomp filter), and reach
// the network only through a registries proxy of their own
// (infra/egress) limited to Options.Registries: by default the host's
// Debian mirrors (HostMirrors), PyPI and npm (DefaultRegistries). So
// apt-get install really installs from the mirror, and pip install, uv
// and npm install from their registries, while a RUN that fetches from
// any other host (curl of an installer script, git clone) fails, its
// error naming the hosts the proxy refused. The proxy's variables and
// the host's certificate bundle (egress.CABundle, for hosts behind a
// TLS-intercepting gateway) are given to the step but are not among its
// layer's inputs; every request is in Result.Egress and in the build
// log. COPY and ADD of the build context, ENV, ARG, WORKDIR and USER
// root are applied as the sandbox applies them (the Dockerfile parser
// is the sandbox's).
//
// Multi-stage Dockerfiles build: each FROM starts a stage, from an image
// the base maps or from an earlier stage (FROM name), with the ARGs set
// before the first FROM; COPY --from=name (or the stage's position, or
// an image the base maps, built as a stage of its own) copies from that
// stage's root filesystem, mounted read-only, with the no-link rules of
// every COPY (a source through a link, such as /bin on a merged-/usr
// root, is refused: name it under /usr). Its layer's key covers the
// source stage's last key, which names that stage's whole filesystem.
// The image is the last stage's layers; the earlier stages' layers stay
// in the cache and their FROMs in the image's notes. COPY --from of an
// image the base does not map (ghcr.io/astral-sh/uv), ADD of a URL and
// unknown base images fail at build with one line naming the
// instruction and the reason; so does a RUN that fails (its exit code
// and last output line).
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
