"""`sagemaker_inference.content_types`: the toolkit's media type constants."""

JSON = "application/json"
CSV = "text/csv"
OCTET_STREAM = "application/octet-stream"
ANY = "*/*"
NPY = "application/x-npy"
NPZ = "application/x-npz"
UTF8_TYPES = [JSON, CSV]
