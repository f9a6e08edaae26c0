"""``sapo-gym webshop serve``: run the shop for a person (or a remote driver) in a browser."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("webshop", help="the WebShop web app")
    cmds = p.add_subparsers(dest="webshop_command", required=True, metavar="COMMAND")
    s = cmds.add_parser("serve", help="serve the shop over HTTP (open the printed address in a browser)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1 keeps it local)")
    s.add_argument("--port", type=int, default=3000, help="TCP port (0: any free port)")
    s.add_argument(
        "--data-dir", default=None, help="WebShop files (else $SAPO_WEBSHOP_DATA, else the generated catalog)"
    )
    s.add_argument("--num-products", type=int, default=None, help="catalog size (generated: default 1000)")
    s.add_argument(
        "--split",
        default="test",
        choices=["test", "train", "verl-agent-test", "verl-agent-train"],
        help="the goals / draws from: WebShop's human goals (test, train) or verl-agent's synthetic ones",
    )
    s.add_argument("--show-attrs", action="store_true", help="show the Attributes sub-page, as WebShop's show_attrs")
    s.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from sapo_gym.webshop.app import create_app
    from sapo_gym.webshop.dataset import load_split_catalog
    from sapo_gym.webshop.search import shared_index

    catalog = load_split_catalog(args.split, args.data_dir, num_products=args.num_products)
    app = create_app(
        catalog, shared_index(catalog), goal_range=catalog.goal_indices(args.split), show_attrs=args.show_attrs
    )
    server = make_server(args.host, args.port, app, threaded=True)
    print(
        f"WebShop ({catalog.source}, {len(catalog.products)} products, {args.split} goals) at "
        f"http://{args.host}:{server.server_port}/  (Ctrl-C to stop)",
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
