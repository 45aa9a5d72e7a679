"""start_async's request_id, checked the same way for an ExecutableNetwork and a
HETERO one."""
from __future__ import annotations

from core.errors import Error


def request_index(exec_net, request_id) -> int:
    """`request_id` when it names one of the network's requests, else an Error."""
    if isinstance(request_id, bool) or not isinstance(request_id, int) or not 0 <= request_id < len(exec_net.requests):
        raise Error("start_async: request_id {!r} is not one of the network's requests (0 to {}; load_network's "
                    "num_requests makes more)", request_id, len(exec_net.requests) - 1)
    return request_id
