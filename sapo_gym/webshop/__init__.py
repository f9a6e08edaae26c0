"""WebShop (Yao et al., 2022) for sapo_gym: a real flask shop, text and browser modes, WebShop's reward.

Modules: :mod:`.catalog` (WebShop's raw files → products and goals), :mod:`.generate` (the
embedded generated catalog), :mod:`.dataset` (which catalog), :mod:`.search` (BM25),
:mod:`.reward` (the purchase score), :mod:`.nouns` / :mod:`.noun_table` (its title nouns, tagged once), :mod:`.shop` (the page state machine and the oracle),
:mod:`.env` (``sapo/WebShop-v0``), :mod:`.app` (flask), :mod:`.browser`
(``sapo/WebShop-Browser-v0``), :mod:`.data` (``sapo-gym data webshop``). Nothing is imported here:
``import sapo_gym`` stays light.
"""
