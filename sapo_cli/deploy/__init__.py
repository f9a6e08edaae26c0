"""How the sapo-gym servers are served: nginx in front, the app server behind it, one supervising process.

``sapo-gym leaderboard serve`` (gunicorn behind nginx) and ``sapo-gym env serve`` (uvicorn behind nginx) both:

* render the shipped ``nginx.conf`` (beside this file) with their listen address, limits and upstream socket
  into a private run directory (:mod:`.nginx`);
* bind the public port and the app server's Unix socket themselves, hand each to its child, and supervise
  both children, stopping them in order on SIGTERM or SIGINT (:mod:`.supervise`).

nginx bounds the transport (slow headers, slow bodies, body size, connections per client address); the app
server behind it sees only whole requests and checks their content.
"""
