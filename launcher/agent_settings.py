"""The card agent's own settings, from its flags or its environment (`QUARTET_AGENT_<NAME>`; a flag wins).

    python -m launcher.card_agent --card 0 --listen 10.10.0.2:50052 --allow-address 10.10.0.2
    QUARTET_AGENT_CARD=0 QUARTET_AGENT_LISTEN=10.10.0.2:50052 QUARTET_AGENT_ALLOW_ADDRESS='["10.10.0.2"]' \
        python -m launcher.card_agent
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.endpoint import HEALTH_OFFSET, Endpoint, EndpointText


class AgentSettings(BaseSettings):
    """The card agent: ggml's RPC server for one card, and its health endpoint."""

    model_config = SettingsConfigDict(
        env_prefix="QUARTET_AGENT_",
        extra="forbid",
        cli_prog_name="card_agent",
        cli_kebab_case=True,
        cli_implicit_flags=True,
    )

    card: int = Field(ge=0, description="Card index (0 = first in the pipeline).")
    listen: EndpointText = Field(description="RPC endpoint host:port.")
    health_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=f"Port of /health (default: the RPC port + {HEALTH_OFFSET}, as the app expects).",
    )
    threads: int = Field(1, ge=1, description="CPU threads of this card's RPC server.")
    cache_dir: Path | None = Field(None, description="Tensor cache folder (fast model reloads).")
    sysfs_root: Path = Field(Path("/"), description="Root of the card's sysfs (tests use a fixture).")
    allow_address: list[str] = Field(
        default_factory=list, description="A non-loopback address that is the internal link (repeatable)."
    )
    die_with_parent: bool = Field(False, description="Exit when the launcher dies.")

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint.parse(self.listen)

    @property
    def health(self) -> int:
        return self.health_port or self.endpoint.health_port()


def from_command_line(argv: list[str] | None = None) -> AgentSettings:
    """The settings of `argv` (default: this process's flags) over the environment; a wrong value ends
    the process with exit code 2 and one line per problem, as a wrong flag does."""
    try:
        return AgentSettings(_cli_parse_args=sys.argv[1:] if argv is None else argv)
    except ValidationError as err:
        for error in err.errors():
            name = ".".join(str(part) for part in error["loc"])
            flag = "--" + name.replace("_", "-")
            message = str(error["msg"]).removeprefix("Value error, ")
            print(f"card_agent: {flag} (or QUARTET_AGENT_{name.upper()}): {message}", file=sys.stderr)
        raise SystemExit(2) from None
