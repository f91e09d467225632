//! The webhook's response body: an admission answer is sent as the bytes the handler wrote,
//! everything else (the JSON `Status` of a 404 or 405) as axum built it.
//!
//! Why not axum's `Body` for both: it boxes every body and turns a `Vec` into `Bytes`, which
//! costs two allocations per admission request for an answer that is already one buffer.

use std::io::Cursor;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};

pub type Response = http::Response<ResponseBody>;

pub enum ResponseBody {
    /// A whole body in one buffer, `None` once sent.
    Full(Option<Vec<u8>>),
    Axum(axum::body::Body),
}

impl From<Vec<u8>> for ResponseBody {
    fn from(bytes: Vec<u8>) -> Self {
        ResponseBody::Full(Some(bytes))
    }
}

impl From<axum::body::Body> for ResponseBody {
    fn from(body: axum::body::Body) -> Self {
        ResponseBody::Axum(body)
    }
}

impl ResponseBody {
    /// For axum handlers, whose responses need axum's body type.
    pub fn into_axum(self) -> axum::body::Body {
        match self {
            ResponseBody::Full(bytes) => axum::body::Body::from(bytes.unwrap_or_default()),
            ResponseBody::Axum(body) => body,
        }
    }
}

/// A chunk of a [`ResponseBody`].
pub enum Chunk {
    Vec(Cursor<Vec<u8>>),
    Bytes(Bytes),
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        match self {
            Chunk::Vec(c) => c.remaining(),
            Chunk::Bytes(b) => b.remaining(),
        }
    }

    fn chunk(&self) -> &[u8] {
        match self {
            Chunk::Vec(c) => c.chunk(),
            Chunk::Bytes(b) => b.chunk(),
        }
    }

    fn advance(&mut self, n: usize) {
        match self {
            Chunk::Vec(c) => c.advance(n),
            Chunk::Bytes(b) => b.advance(n),
        }
    }
}

impl Body for ResponseBody {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Chunk>, axum::Error>>> {
        match self.get_mut() {
            ResponseBody::Full(bytes) => {
                Poll::Ready(bytes.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(Chunk::Vec(Cursor::new(b))))))
            }
            ResponseBody::Axum(body) => {
                Pin::new(body).poll_frame(cx).map(|frame| frame.map(|f| f.map(|f| f.map_data(Chunk::Bytes))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.as_ref().is_none_or(Vec::is_empty),
            ResponseBody::Axum(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, Vec::len) as u64),
            ResponseBody::Axum(body) => body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn collect(body: ResponseBody) -> (Vec<u8>, usize) {
        let mut body = std::pin::pin!(body);
        let (mut out, mut frames) = (Vec::new(), 0);
        while let Some(frame) = body.frame().await {
            let mut data = frame.expect("no error").into_data().ok().expect("data frame");
            while data.has_remaining() {
                let chunk = data.chunk().to_vec();
                data.advance(chunk.len());
                out.extend_from_slice(&chunk);
            }
            frames += 1;
        }
        (out, frames)
    }

    #[tokio::test]
    async fn both_kinds_send_their_bytes_once_with_an_exact_size() {
        let cases: [(&str, ResponseBody, &[u8], usize); 4] = [
            ("full", ResponseBody::from(b"{\"a\":1}".to_vec()), b"{\"a\":1}", 1),
            ("empty full", ResponseBody::from(Vec::new()), b"", 0),
            ("axum", ResponseBody::from(axum::body::Body::from("status")), b"status", 1),
            ("empty axum", ResponseBody::from(axum::body::Body::empty()), b"", 0),
        ];
        for (name, body, want, frames) in cases {
            assert_eq!(body.size_hint().exact(), Some(want.len() as u64), "{name}: size hint");
            assert_eq!(body.is_end_stream(), want.is_empty(), "{name}: end of stream");
            let (got, got_frames) = collect(body).await;
            assert_eq!((got.as_slice(), got_frames), (want, frames), "{name}");
        }
    }

    #[tokio::test]
    async fn into_axum_keeps_the_bytes() {
        let body = ResponseBody::from(b"answer".to_vec()).into_axum();
        assert_eq!(body.collect().await.unwrap().to_bytes().as_ref(), b"answer");
    }
}
