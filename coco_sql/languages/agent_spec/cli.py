"""The data-agent kind's own command, `coco-sql demo-agent-server`: the scripted data agent behind an
OpenAI-compatible endpoint, to see the kind work end to end offline. It is not a language model: it answers
DABStep's fee questions by rules, applying a rule only when the spec it is given states it (`demo_model`).

A plug-in command (`plugin_loader.BUILTIN_COMMANDS`): the CLI adds its parser when it builds its own, so this
module imports only argparse and the CLI's help; the server and the model load when the command runs."""

from __future__ import annotations

import argparse
import sys

from coco_sql.cli_help import command

DEMO_MODEL = "scripted-data-agent"


def add_parser(commands: argparse._SubParsersAction) -> None:
    demo = command(
        commands, "demo-agent-server", "serve the scripted data agent (not a language model) for an offline demo",
        "An OpenAI-compatible endpoint whose model is a script: it answers the dabstep pack's fee questions by "
        "rules, and only with the rules the agent's spec states, so a better spec scores more. Point a run at it "
        f"with OPENAI_BASE_URL=http://HOST:PORT/v1 and --completion-model openai/{DEMO_MODEL}. Ctrl-C stops it.",
    )  # fmt: skip
    demo.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    demo.add_argument("--port", type=int, default=8765, help="the port to listen on (0: any free port)")
    demo.set_defaults(handler=cmd_demo_agent_server)


def cmd_demo_agent_server(args: argparse.Namespace) -> int:
    from coco_sql.errors import ConfigError
    from coco_sql.languages.agent_spec.demo_model import DataAgentModel
    from coco_sql.llm.scripted_server import ScriptedServer

    try:
        server = ScriptedServer(DataAgentModel(), DEMO_MODEL, args.host, args.port)
    except OSError as error:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {error.strerror}") from None
    print(
        f"scripted data agent (a script, not a language model) at {server.base_url}\n"
        f"in another terminal:\n"
        f"  export OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=demo\n"
        f"  coco-sql evolve dabstep --budget 2 --seed 1 --completion-model openai/{DEMO_MODEL} --db runs/agent.duckdb",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.close()
    return 0
