"""Our own procedural generator of ALFWorld games (the embedded offline default, ``generated-v1``).

Problems are sampled in AI2-THOR floor plans (``alfworld/gen/layouts``) under ALFWorld's own rules
and rendered in ALFWorld's PDDL domain and text grammar; each is kept only if the bundled Fast
Downward planner finds a plan that wins when replayed. These games are *generated*: the same
engine and language as the official ALFWorld games, but not the official benchmark.
"""
