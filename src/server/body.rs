//! The webhook's response body: the bytes the handler wrote, sent as one frame.
//!
//! Why not axum's `Body`: it boxes every body and turns a `Vec` into `Bytes`, which costs two
//! allocations per admission request for an answer that is already one buffer.

use std::convert::Infallible;
use std::io::Cursor;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

pub(crate) type Response = http::Response<ResponseBody>;

/// A whole body in one buffer, `None` once sent.
pub(crate) struct ResponseBody(Option<Vec<u8>>);

impl From<Vec<u8>> for ResponseBody {
    fn from(bytes: Vec<u8>) -> Self {
        ResponseBody(Some(bytes))
    }
}

impl Body for ResponseBody {
    type Data = Cursor<Vec<u8>>;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Infallible>>> {
        Poll::Ready(self.get_mut().0.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(Cursor::new(b)))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Vec::is_empty)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, Vec::len) as u64)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Buf;
    use http_body_util::BodyExt;

    use super::*;

    async fn collect(body: ResponseBody) -> (Vec<u8>, usize) {
        let mut body = std::pin::pin!(body);
        let (mut out, mut frames) = (Vec::new(), 0);
        while let Some(frame) = body.frame().await {
            let mut data = frame.expect("no error").into_data().expect("data frame");
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
    async fn sends_its_bytes_once_with_an_exact_size() {
        let cases: [(&str, ResponseBody, &[u8], usize); 2] = [
            ("full", ResponseBody::from(b"{\"a\":1}".to_vec()), b"{\"a\":1}", 1),
            ("empty", ResponseBody::from(Vec::new()), b"", 0),
        ];
        for (name, body, want, frames) in cases {
            assert_eq!(body.size_hint().exact(), Some(want.len() as u64), "{name}: size hint");
            assert_eq!(body.is_end_stream(), want.is_empty(), "{name}: end of stream");
            let (got, got_frames) = collect(body).await;
            assert_eq!((got.as_slice(), got_frames), (want, frames), "{name}");
        }
    }
}
