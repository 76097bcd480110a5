"""`python -m coco_sql.llm.providers.llama_server --model GGUF --host 127.0.0.1 --port P`: llama_cpp.server with
llama.cpp's CPU extra buffer types off (see `local_llama.disable_extra_buffers`), so it also serves on CPUs where a
native llama.cpp build crashes (AMX). Takes exactly the arguments of `python -m llama_cpp.server`.
"""

from __future__ import annotations

from coco_sql.llm.providers.local_llama import disable_extra_buffers


def main() -> None:
    disable_extra_buffers()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
