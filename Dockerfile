# One image for CPU and GPU. The base image brings the real TensorFlow Serving (tensorflow_model_server), which
# `serve` runs; scripts/install.sh's image profile installs nginx and the proxy and `serve` without TensorFlow
# (test/image runs the same recipe on every test run).
#   docker build -t sagemaker-tfs:cpu .
#   docker build -t sagemaker-tfs:gpu --build-arg BASE_IMAGE=tensorflow/serving:2.19.0-gpu .
# (scripts/build.sh does both.) SageMaker runs `docker run <image> serve`.
ARG BASE_IMAGE=tensorflow/serving:2.19.0
FROM ${BASE_IMAGE}

LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      com.amazonaws.sagemaker.capabilities.multi-models=true

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    INSTALL_PROFILE=image

WORKDIR /opt/sagemaker-tfs
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY scripts/install.sh scripts/install.sh
COPY container container
COPY tensorflow-protos tensorflow-protos
RUN scripts/install.sh && rm -rf /var/lib/apt/lists/* /root/.cache

ENV PATH=/opt/sagemaker-tfs/.venv/bin:$PATH
EXPOSE 8080
ENTRYPOINT ["serve"]
