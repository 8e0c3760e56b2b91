"""Keys: the server key rule (httplimit/key.go) and the key functions that
name what a request counts against."""

import base64
import hashlib
import ipaddress
from typing import Callable, Iterable, List, Optional, Sequence, Union

#: The longest client key stored as it is; longer ones are hashed.
MAX_VERBATIM_KEY = 128

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


def hash_tag(key: str) -> str:
    """The part of a server key between braces: the key itself when it is
    not empty, at most 128 bytes (UTF-8), holds no brace and does not start
    with '='; otherwise '=' and the unpadded base64url SHA-256 of it. The two
    forms cannot collide, and a client's own bytes can neither split its keys
    across hash slots nor grow them without bound."""
    raw = key.encode("utf-8", "surrogateescape")
    if raw and len(raw) <= MAX_VERBATIM_KEY and not raw.startswith(b"=") and b"{" not in raw and b"}" not in raw:
        return key
    digest = hashlib.sha256(raw).digest()
    return "=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def server_key(prefix: str, policy: str, key: str) -> str:
    """<prefix><policy name>:{<hash tag of key>}, e.g. "burst:{ip:192.0.2.1}"."""
    return f"{prefix}{policy}:{{{hash_tag(key)}}}"


class Request:
    """What a key function sees of an HTTP request, the same for ASGI and
    WSGI: the connection's peer and the header fields.

    remote_addr is the peer's address ("192.0.2.1", "2001:db8::1"), or None
    when the connection has none (a unix socket). raw is the ASGI scope or
    the WSGI environ, for key functions that need more (an authenticated
    user an earlier middleware placed there).
    """

    __slots__ = ("remote_addr", "_headers", "raw")

    def __init__(self, remote_addr: Optional[str], headers: Sequence[tuple], raw: object = None):
        self.remote_addr = remote_addr
        # (lower-case name, value) pairs, in the order received.
        self._headers = headers
        self.raw = raw

    def header_values(self, name: str) -> List[str]:
        """Every field line of the header name (case-insensitive), in order."""
        name = name.lower()
        return [v for k, v in self._headers if k == name]

    def header(self, name: str) -> Optional[str]:
        """The first field line of the header name, or None."""
        name = name.lower()
        for k, v in self._headers:
            if k == name:
                return v
        return None


#: A key function names the entity a request is counted against
#: ("ip:192.0.2.1", "user:42"), or returns None: the request then passes
#: unlimited. It may be called from many threads at once.
KeyFunc = Callable[[Request], Optional[str]]


def _parse_hop(s: str) -> Optional[IPAddress]:
    """An address as a peer or X-Forwarded-For writes it: "192.0.2.1",
    "192.0.2.1:1234", "2001:db8::1" or "[2001:db8::1]:1234"; without its
    zone, IPv4-mapped IPv6 as IPv4. None when it is not one."""
    host = s
    if s.startswith("["):
        end = s.find("]")
        if end < 0 or not s[end + 1:].startswith(":") or not s[end + 2:].isdigit():
            return None
        host = s[1:end]
    elif s.count(":") == 1:
        host, _, port = s.partition(":")
        if not port.isdigit():
            return None
    host = host.split("%", 1)[0]
    try:
        a = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        return a.ipv4_mapped
    return a


def _trusted(prefix: Union[str, IPNetwork]) -> IPNetwork:
    n = ipaddress.ip_network(prefix, strict=False)
    if isinstance(n, ipaddress.IPv6Network) and n.network_address.ipv4_mapped is not None and n.prefixlen >= 96:
        return ipaddress.ip_network((n.network_address.ipv4_mapped, n.prefixlen - 96), strict=False)
    return n


def _is_trusted(a: IPAddress, trusted: Sequence[IPNetwork]) -> bool:
    return any(a in p for p in trusted)


def client_ip(req: Request, trusted: Sequence[Union[str, IPNetwork]] = ()) -> Optional[IPAddress]:
    """The request's client address as by_ip determines it, or None when
    the peer is not an IP address."""
    nets = [_trusted(p) for p in trusted]
    return _client_ip(req, nets)


def _client_ip(req: Request, trusted: Sequence[IPNetwork]) -> Optional[IPAddress]:
    addr = _parse_hop(req.remote_addr) if req.remote_addr else None
    if addr is None:
        return None
    if not _is_trusted(addr, trusted):
        return addr
    for line in reversed(req.header_values("x-forwarded-for")):
        for hop in reversed(line.split(",")):
            s = hop.strip()
            if not s:
                continue
            a = _parse_hop(s)
            if a is None:
                return addr
            if not _is_trusted(a, trusted):
                return a
            addr = a
    return addr


def by_ip(*trusted: Union[str, IPNetwork]) -> KeyFunc:
    """Keys a request by its client's IP address: "ip:<address>", or
    "ip:<network>/64" for IPv6 (one host usually holds a whole /64).

    The client is the connection's peer unless that peer is in one of the
    trusted prefixes ("10.0.0.0/8": your load balancers): then
    X-Forwarded-For is read from right to left (its last field line first),
    skipping the trusted hops, and the first untrusted address is the
    client. An entry that is not an address stops the walk at the last
    trusted hop; a chain trusted all the way gives its left-most address.
    With no trusted prefix the header is ignored: anyone can write it.
    None when the peer is not an IP address (a unix socket).
    """
    nets = [_trusted(p) for p in trusted]

    def key(req: Request) -> Optional[str]:
        a = _client_ip(req, nets)
        if a is None:
            return None
        if isinstance(a, ipaddress.IPv6Address):
            return "ip:" + str(ipaddress.IPv6Network((a, 64), strict=False))
        return "ip:" + str(a)

    return key


def by_header(name: str) -> KeyFunc:
    """Keys a request by a header's value: "<lower-case name>:<value>"
    (surrounding spaces trimmed); None when the header is absent or empty.
    Only for values the server checks (an API key validated earlier)."""
    prefix = name.lower() + ":"

    def key(req: Request) -> Optional[str]:
        v = (req.header(name) or "").strip()
        return prefix + v if v else None

    return key


def by_user(user: Callable[[Request], Optional[str]]) -> KeyFunc:
    """Keys a request by its authenticated user: "user:<id>". user returns
    the id an authentication middleware placed in the request (req.raw), or
    None (or "") for an anonymous request."""

    def key(req: Request) -> Optional[str]:
        uid = user(req)
        return "user:" + uid if uid else None

    return key


def first_key(*fns: KeyFunc) -> KeyFunc:
    """The key of the first of fns that has one: first_key(by_user(f),
    by_ip()) limits signed-in users by account and the others by address."""
    fns_: Iterable[KeyFunc] = tuple(fns)

    def key(req: Request) -> Optional[str]:
        for f in fns_:
            k = f(req)
            if k:
                return k
        return None

    return key
