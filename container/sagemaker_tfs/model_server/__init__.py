"""An embedded TensorFlow Serving: `tensorflow_model_server`'s command line, REST and gRPC APIs, in Python.

Used wherever the real binary is not installed (laptops, CI, `serve` without Docker). It loads TF1 and TF2
SavedModels with the TF1 loader and runs signatures by tensor name (servable.py), and TensorFlow Lite models with
--prefer_tflite_model (tflite_servable.py); replays a version's warm-up file before it serves (warmup.py); serves
TFS's REST API with TFS's bodies and error texts (rest.py, json_request.py, shared/tfs_json_response.py; its HTTP/1.1
protocol is http_server.py) and TFS's gRPC services (grpc_service.py, prediction_api.py); batches concurrent
requests like TFS's batch scheduler (batch_scheduler.py); and discovers versions by folder with TFS's version
policies (model_config.py, servable_manager.py).

Run it as `tfs-model-server --port=8500 --rest_api_port=8501 --model_config_file=models.config` (or
`--model_name=NAME --model_base_path=DIR`); flags.py lists every flag.

Deliberate difference from tensorflow_model_server: a model that fails to load does not stop the server.
Once every configured model has had its load attempt (with --max_num_load_retries retries), the ports open,
the healthy models serve, and the failed version's status is END with the error code and message (also
logged as an error). Likewise a model with no version folder is logged and the server starts (TFS would wait
for one forever); with --file_system_poll_wait_seconds > 0, versions that appear later are loaded.
"""
