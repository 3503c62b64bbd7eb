"""The Jupyter server's kernel websocket with Nagle's algorithm off (``widget.py --server-nodelay``).

jupyter_server never sets TCP_NODELAY on the kernel websocket (tornado leaves it to the
handler: ``WebSocketHandler.set_nodelay``). A small message written while the one before
it is not yet acknowledged is then held until the browser's delayed ACK (40 ms on Linux):
every widget answer that follows a kernel ``status: busy`` comes ~40-50 ms late. This is a
server setting, made with the supported ``ServerApp.kernel_websocket_connection_class``
trait; fxviz, a library in the kernel, cannot make it for its users.
"""

from __future__ import annotations

import asyncio

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """Every frame to the page is written at once."""

    def connect(self) -> asyncio.Future[None] | None:
        self.websocket_handler.set_nodelay(True)
        return super().connect()
