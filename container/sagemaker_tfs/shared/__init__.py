"""Small rules every process uses, below every other part of the package (they import nothing of it but errors).

media_types.py      the media types and their aliases (one table), and reading a Content-Type
json_bodies.py      the JSON bodies the stack writes: one encoder, one error body
headers.py          SageMaker's request headers, and a header's WSGI environ key
text_records.py     the CSV and JSON lines readers of the codecs and the toolkit, and their line layout
npy.py              NPY bodies, never unpickled
version_folders.py  what a version folder's name may be
model_names.py      what a multi-model name may be
model_tree.py       finding and validating the SavedModels of a model folder
handler_contract.py which contract a script's names choose
runtime_dir.py      the private runtime folder and the files created in it
metrics_files.py    the metrics folder's file format
reload_generation.py the metadata key of the registry's numbered reloads
gpus.py             the GPUs CUDA sees (nvidia-smi, CUDA_VISIBLE_DEVICES), worker slots and gpu_id
str_enum.py         enum.StrEnum on Python 3.10 too
version_states.py   TensorFlow Serving's version states (START ... END)
logs.py             text or JSON log lines
storage.py          local paths and s3:// objects (Batch Transform, the runtime API's asynchronous work)
sockets.py          sending an HTTP message and socket timeouts (the app's client and the worker)
"""
