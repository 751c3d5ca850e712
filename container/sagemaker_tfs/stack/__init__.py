"""`serve`'s process: starting, supervising and stopping the stack.

supervisor.py        Child and Stack: start the children in order, restart one that dies, drain on stop
multi_model.py       what a multi-model endpoint's stack does differently (the registry owner and its sockets)
commands.py          the model servers' and gunicorn's command lines, the batching file
extras.py            which packages of an extra are installed (the embedded model server's)
nginx.py             nginx's config (nginx.conf.template) and command line
requirements.py      pip install of code/requirements.txt, the container's own packages pinned
readiness.py         nginx's listening socket, for start-up
metrics_page.py      serve's Prometheus page (SAGEMAKER_METRICS)
direct_metrics.py    the direct route's requests, counted from nginx's datagrams, for that page
reaper.py            kills what serve started if serve is killed (SIGKILL)
processes.py         the machine's processes from /proc (process group, session), for those two
"""
