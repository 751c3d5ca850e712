"""Multi-model endpoints (`SAGEMAKER_MULTI_MODEL=true`, ../shared/specs/multi-model.md): models loaded, invoked and
unloaded at run time.

    names.py        model_name validation; the digest that names a model's runtime files
    source.py       a load's `url`: confinement to the model root, the layout, the code folder (checks 3, 5-7)
    limits.py       SAGEMAKER_MULTI_MODEL_MAX_MODELS and the memory in use (cgroup-aware): the 507s before a load
    owner.py        the one registry, owned by `serve`: loads and unloads, per-name turns, model server reloads
    publication.py  the registry's snapshots sent to every gunicorn worker over a UNIX socket, and their acks
    management.py   the Falcon app of POST/GET /models, GET/DELETE /models/{name} (served by the owner)
    worker.py       the gunicorn workers' app: POST /models/{name}/invoke, /invocations, /ping
    stack.py        what `serve` does differently in multi-model mode
"""
