"""The sapo-gym leaderboard: a replay-verifying server for result bundles, and its web pages.

The bundles themselves (format, building, strict parsing and checks) are the envs' evaluation output:
:mod:`sapo_gym.bundle` (schema ``sapo_gym/schema/bundle-v1.json``). Here:

* :mod:`leaderboard.boards` lists the hosted (env, split) boards and their spec hashes;
* :mod:`leaderboard.replay` re-executes a bundle's episodes to verify them;
* :mod:`leaderboard.server` is the flask + SQLAlchemy application.

Importing this package imports neither flask nor SQLAlchemy.
"""
