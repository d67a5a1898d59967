// Package egress is the one way out of a sandbox whose network policy is
// "registries": an HTTP(S) proxy that t1 runs on the host and that
// forwards only to the hosts of an allow-list (by default the package
// registries the host reaches: the Debian mirror its apt is configured
// for, PyPI and npm), logging every request.
//
// A sandbox keeps its own network namespace with nothing but loopback.
// The proxy reaches it without a route or an interface: ListenIn enters
// the namespace of a sandbox's first process from a locked host thread
// (setns, which needs host root), makes a listening socket there on port
// Port of every address the namespace has (loopback only), and returns to
// the host's namespace; the socket stays in the sandbox's. Proxy.Serve
// then answers connections to 127.0.0.1:3128 inside the sandbox from the
// host process. No program of t1's runs inside, so there is nothing
// there for the sandbox's processes to tamper with but their own copy of
// the environment (Env): a process that ignores it still reaches nothing
// but the proxy, which is where the allow-list is enforced.
//
// The proxy speaks HTTP/1.1 as a forward proxy: CONNECT host:port for
// https (a tunnel of opaque bytes; the proxy never sees inside TLS), and
// GET or HEAD of an absolute http:// URL for plain mirrors (apt). An
// allow-list entry is a host name or address, which allows ports 443
// (CONNECT) and 80 (GET), or host:port, which allows that port for
// either. Names are matched exactly, case-insensitively; the proxy
// resolves them with the host's resolver, so the sandbox itself never
// needs DNS. Anything else gets 403 (a host or port not on the list),
// 405 (another method of plain http) or 400 (a request that is not a
// proxy request), with a one-line reason.
//
// Every request is logged (Request: host, port, method, allowed or
// refused and why, bytes carried both ways), up to MaxRequests per
// proxy; past it the requests are still answered but only counted
// (Omitted), so a flood cannot grow the record without bound. A tunnel
// is logged when it ends. Close ends every connection and listener.
package egress
