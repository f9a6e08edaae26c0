"""The leaderboard server: flask app (:mod:`.app`), JSON API (:mod:`.api`), pages (:mod:`.pages`),
SQLAlchemy storage (:mod:`.db`, :mod:`.store`) and the replay verifier (:mod:`.worker`).

``create_app(ServerConfig(...))`` is the WSGI entry point; ``sapo-gym leaderboard serve`` runs it.
"""
