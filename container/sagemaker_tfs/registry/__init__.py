"""The registry of a multi-model endpoint (`SAGEMAKER_MULTI_MODEL=true`, docs/multi-model.md): models loaded and
unloaded at run time. Its owner runs in `serve`'s process; publication.Subscriber runs in every gunicorn worker and
keeps the worker's copy, which the invoke routes (app/multi_model.py) follow.

    source.py       a load's `url`: confinement to the model root, the layout, the code folder (checks 3, 5-7)
    limits.py       SAGEMAKER_MULTI_MODEL_MAX_MODELS and the memory in use (cgroup-aware): the 507s before a load
    owner.py        the one registry: loads and unloads, per-name turns, model server reloads
    publication.py  the registry's snapshots sent to every gunicorn worker over a UNIX socket, and their acks
    management.py   the Falcon app of POST/GET /models, GET/DELETE /models/{name}, on its own UNIX socket
"""
