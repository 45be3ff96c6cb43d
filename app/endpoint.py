"""A card's address, `host:port`, parsed in one place, and where its agent's health endpoint is.

Settings, the admin's card list, the engine's probes and the launcher all read endpoints through
`Endpoint.parse`; a bad one is refused with the same message everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

# A card agent serves /health on its RPC port plus this (the launcher's and the agent's default alike).
HEALTH_OFFSET = 1000


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """`host:port` (the last colon splits, so `::1:50052` is IPv6 loopback); ValueError saying what is
        wrong otherwise."""
        host, colon, port = text.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"card endpoint {text!r} is not host:port (an address and a port from 1 to 65535, "
                "for example 10.10.0.2:50052)"
            )
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def health_port(self, offset: int = HEALTH_OFFSET) -> int:
        return self.port + offset

    def health_url(self, offset: int = HEALTH_OFFSET) -> str:
        return f"http://{self.host}:{self.health_port(offset)}/health"


def checked(text: str) -> str:
    """`text` as a clean `host:port` string, or the ValueError of `Endpoint.parse`."""
    return str(Endpoint.parse(text))


# A `host:port` string in settings and requests: checked when it is read, kept as text.
EndpointText = Annotated[str, AfterValidator(checked)]
