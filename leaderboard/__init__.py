"""The sapo-gym leaderboard: result bundles, a replay-verifying server, and its web pages.

* :mod:`leaderboard.bundle` builds and checks result bundles (schema ``schema/bundle-v1.json``);
* :mod:`leaderboard.boards` lists the hosted (env, split) boards and their spec hashes;
* :mod:`leaderboard.replay` re-executes a bundle's episodes to verify them;
* :mod:`leaderboard.server` is the flask + SQLAlchemy application.

Importing this package imports neither flask nor SQLAlchemy.
"""
