# One recipe for CPU and GPU: the base is TensorFlow Serving's own image, which brings tensorflow_model_server (the
# model server `serve` runs) and, for GPU, the CUDA libraries it needs (tensorflow/serving:2.20.0-gpu is
# nvidia/cuda:12.5.1-base-ubuntu22.04), so we add to that image rather than copy the binary into another base.
# tensorflow/serving:2.20.0 and its -gpu are Ubuntu 22.04, whose python3 is 3.10, the lowest Python sagemaker-tfs
# supports: the proxy and `serve` (no TensorFlow) run on the base's own Python. The first step installs python3,
# python3-venv and nginx from the base's apt when the base has no python3 >= 3.10 with venv (a base that brings
# one is used as it is), and fails the build at once, with one message, on a base whose Python is older
# (tensorflow/serving:2.19.0 and before are Ubuntu 20.04, Python 3.8).
# The Python packages come from a wheelhouse built on the host (scripts/wheelhouse.sh; exact versions in
# scripts/image-constraints.txt) and are installed with --no-index: the build needs no network but the base's apt.
#   scripts/build-image.sh [cpu|gpu] [tag]    (builds the wheelhouse, then this file, with docker or podman)
# SageMaker runs `docker run <image> serve`.
ARG BASE_IMAGE=tensorflow/serving:2.20.0
FROM ${BASE_IMAGE}
ARG WHEELHOUSE=build/wheelhouse
# what the mounted build context holds (scripts/build-image.sh): a change builds the install steps again
ARG SOURCES_DIGEST=

# what the image was built from (scripts/build-image.sh): serve's first log line names the same version and commit
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE_URL=unknown

LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      com.amazonaws.sagemaker.capabilities.multi-models=true \
      org.opencontainers.image.title=sagemaker-tfs \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION} \
      org.opencontainers.image.source=${SOURCE_URL} \
      org.opencontainers.image.licenses=Apache-2.0

WORKDIR /opt/sagemaker-tfs
RUN --mount=type=bind,source=scripts,target=/tmp/build-scripts \
    sh /tmp/build-scripts/check-base-python.sh --install
# The build context is mounted, not copied: the wheelhouse and the install script leave no layer behind.
# nginx before 1.19.5 (Ubuntu 22.04's 1.18) has no -e: what it logs before it reads serve's config goes to
# /var/log/nginx/error.log, which is made stderr, for any user and on a read-only root (here, in the image only:
# the install script also runs on hosts, whose nginx log it leaves alone).
RUN --mount=type=bind,target=/tmp/build-context \
    PIP_NO_CACHE_DIR=1 INSTALL_PROFILE=image INSTALL_VENV=/opt/sagemaker-tfs/.venv \
    INSTALL_WHEELHOUSE="/tmp/build-context/${WHEELHOUSE}" /tmp/build-context/scripts/install.sh \
 && rm -rf /var/lib/apt/lists/* /root/.cache \
 && ln -sf /dev/stderr /var/log/nginx/error.log

ENV PATH=/opt/sagemaker-tfs/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
EXPOSE 8080
ENTRYPOINT ["serve"]
