"""docker-py, imported on first use, and its errors translated into Jianmu's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from jianmu.errors import MissingExtraError, SandboxError, SandboxUnavailableError

__all__ = ("docker_errors", "import_docker")


def import_docker() -> Any:
    """The ``docker`` package, or a `MissingExtraError` naming the extra."""
    try:
        import docker
    except ImportError as exc:
        raise MissingExtraError("docker", "docker") from exc
    return docker


@contextlib.contextmanager
def docker_errors(action: str, image: str | None = None) -> Iterator[None]:
    """Translate docker-py and requests errors into Jianmu's, naming the fix."""
    docker = import_docker()
    import requests

    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailableError(
            f"the sandbox image {image!r} is not present; build it with `make sandbox-image` "
            "or `jianmu sandbox build-image`"
        ) from exc
    except (docker.errors.APIError, docker.errors.NotFound) as exc:
        raise SandboxError(f"Docker refused to {action}: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(
            f"cannot {action}: the Docker daemon does not answer ({exc}); start it with "
            "`dockerd > /var/log/dockerd.log 2>&1 &` (or `systemctl start docker`), or set "
            "DOCKER_HOST"
        ) from exc
    except requests.exceptions.RequestException as exc:
        # wait()/exec calls with a timeout raise these, not docker errors.
        raise SandboxError(f"Docker did not answer while trying to {action}: {exc}") from exc
