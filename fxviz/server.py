"""A Jupyter server setting that makes every widget answer sooner: opt-in, for the server.

jupyter_server does not turn Nagle's algorithm off on its kernel websockets (tornado leaves
that to the handler, ``WebSocketHandler.set_nodelay``). A small frame written while the
one before it is not yet acknowledged then waits for the browser's delayed ACK, up to
40 ms on Linux, and a widget's answer always follows the kernel's ``status: busy``: each
click that asks the kernel (opening a module fxviz had not laid out ahead, a debugger
step) shows ~40-50 ms later than it could. fxviz runs in the kernel and cannot change the
server's sockets; a server started with this connection class writes every frame at once::

    jupyter lab --ServerApp.kernel_websocket_connection_class=fxviz.server.NoDelayConnection

or, in ``jupyter_server_config.py``::

    c.ServerApp.kernel_websocket_connection_class = "fxviz.server.NoDelayConnection"

It changes nothing else: the messages and their order are jupyter_server's own.
``benchmarks/widget.py --server-nodelay`` measures the difference.
"""

from __future__ import annotations

import asyncio

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

__all__ = ["NoDelayConnection"]


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """jupyter_server's kernel websocket connection, its frames written without delay."""

    def connect(self) -> asyncio.Future[None] | None:
        self.websocket_handler.set_nodelay(True)
        return super().connect()
